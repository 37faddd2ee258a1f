# Package breakwater.lib holds the helpers the built-in restatement and
# classification rules share. Operator policies may import it too.
#
# Every marker list in the bundle is lower-case: markers are matched against
# text, the lower-cased error text of the attempt.
package breakwater.lib

# text is the lower-cased error text rules match markers against: the body
# (bounded to 64 KiB by the gateway), then the structured error code and
# type of an {"error": {"code", "type"}} body, joined by spaces. The gateway
# computes it once and sends it as input.text; an input without text (a
# hand-written test input) gets it computed here from body and error, each
# optional.
text := input.text if input.text

else := lower(concat(" ", [
	object.get(input, "body", ""),
	object.get(input, ["error", "code"], ""),
	object.get(input, ["error", "type"], ""),
]))

# contains_any(markers) holds when text contains one of markers.
contains_any(markers) if contains(text, markers[_])

# header_zero(prefixes) holds when a response header whose (lower-case) name
# starts with one of prefixes has the value 0.
header_zero(prefixes) if {
	value := input.headers[name]
	startswith(name, prefixes[_])
	trim_space(value) == "0"
}

# status_in(statuses) holds when statuses is empty (any status) or holds
# input.status.
status_in(statuses) if count(statuses) == 0

status_in(statuses) if input.status in statuses

# provider_is(p) holds when p is "" (any provider) or input.provider.
provider_is(p) if p == ""

provider_is(p) if p == input.provider
