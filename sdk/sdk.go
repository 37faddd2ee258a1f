package sdk

// The registry below is package state by necessity: a WebAssembly guest is
// one module with one set of exports, and the host calls them with no
// context to carry a handler in. Handlers are registered from init (or
// main) before the host makes its first call; an instance serves one call
// at a time, so nothing here needs locking inside a guest. Native tests that
// register handlers must not run in parallel with each other.
var (
	restateHandler   func(ErrorInput) (Restatement, bool)
	classifyHandler  func(ErrorInput) (Decision, bool)
	onRequestHandler func(RequestInfo) (RequestAction, bool)
	routeHandler     func(RouteInput) (RouteAnswer, bool)
	required         Feature
)

// HandleRestate registers fn as the plugin's restate hook: given a failed
// attempt it returns the corrected status, or false for "no decision". A
// later call replaces the handler; nil removes it. Call it from init.
func HandleRestate(fn func(ErrorInput) (Restatement, bool)) { restateHandler = fn }

// HandleClassify registers fn as the plugin's classify hook: given a failed
// attempt it returns a Decision, or false to leave the attempt to the next
// plugin and the gateway's built-in rules. A later call replaces the
// handler; nil removes it. Call it from init.
func HandleClassify(fn func(ErrorInput) (Decision, bool)) { classifyHandler = fn }

// HandleOnRequest registers fn as the plugin's on_request hook: given a
// client request it returns an action, or false for "leave it alone". A
// later call replaces the handler; nil removes it. Call it from init.
func HandleOnRequest(fn func(RequestInfo) (RequestAction, bool)) { onRequestHandler = fn }

// HandleRoute registers fn as the plugin's route hook: given a request and
// the candidates of its combo it returns an order and exclusions, or
// false to keep the configured order. It runs for every request of a
// combo whose strategy is "plugin:<name>" (the success path), so keep it
// lean. A later call replaces the handler; nil removes it. Call it from
// init.
func HandleRoute(fn func(RouteInput) (RouteAnswer, bool)) { routeHandler = fn }

// Require declares host capabilities (FeatureLog, FeatureKV, FeatureClock)
// the plugin cannot work without; a host that lacks one refuses to load the
// plugin instead of failing its calls. Hook bits passed here are ignored
// (they follow the registered handlers). Call it from init.
func Require(f Feature) {
	required |= f &^ (FeatureRestate | FeatureClassify | FeatureOnRequest | FeatureRoute | FeatureBinary)
}

// Features returns the feature set the plugin declares to the host: a hook
// bit per registered handler, the Require'd capabilities and FeatureBinary
// (the SDK exchanges hook data in the ABI's binary encoding).
func Features() Feature {
	f := required | FeatureBinary
	if restateHandler != nil {
		f |= FeatureRestate
	}
	if classifyHandler != nil {
		f |= FeatureClassify
	}
	if onRequestHandler != nil {
		f |= FeatureOnRequest
	}
	if routeHandler != nil {
		f |= FeatureRoute
	}
	return f
}

// dispatchRestate decodes a restate input, runs the handler and appends the
// encoded answer to out. It returns out unchanged and false for no decision
// (no handler, handler said no, or an input it cannot decode, which it
// logs).
func dispatchRestate(in []byte, out []byte) ([]byte, bool) {
	if restateHandler == nil {
		return out, false
	}
	var v ErrorInput
	if err := decodeErrorInput(in, &v); err != nil {
		Log(LevelError, "sdk: cannot decode restate input: "+err.Error())
		return out, false
	}
	r, ok := restateHandler(v)
	if !ok {
		return out, false
	}
	return appendRestatement(out, &r), true
}

// dispatchClassify is dispatchRestate for the classify hook.
func dispatchClassify(in []byte, out []byte) ([]byte, bool) {
	if classifyHandler == nil {
		return out, false
	}
	var v ErrorInput
	if err := decodeErrorInput(in, &v); err != nil {
		Log(LevelError, "sdk: cannot decode classify input: "+err.Error())
		return out, false
	}
	r, ok := classifyHandler(v)
	if !ok {
		return out, false
	}
	return appendDecision(out, &r), true
}

// dispatchOnRequest is dispatchRestate for the on_request hook.
func dispatchOnRequest(in []byte, out []byte) ([]byte, bool) {
	if onRequestHandler == nil {
		return out, false
	}
	var v RequestInfo
	if err := decodeRequestInfo(in, &v); err != nil {
		Log(LevelError, "sdk: cannot decode on_request input: "+err.Error())
		return out, false
	}
	r, ok := onRequestHandler(v)
	if !ok {
		return out, false
	}
	return appendRequestAction(out, &r), true
}

// dispatchRoute is dispatchRestate for the route hook.
func dispatchRoute(in []byte, out []byte) ([]byte, bool) {
	if routeHandler == nil {
		return out, false
	}
	var v RouteInput
	if err := decodeRouteInput(in, &v); err != nil {
		Log(LevelError, "sdk: cannot decode route input: "+err.Error())
		return out, false
	}
	r, ok := routeHandler(v)
	if !ok {
		return out, false
	}
	return appendRouteAnswer(out, &r), true
}
