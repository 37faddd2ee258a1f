module interrupttest/guest

go 1.26
