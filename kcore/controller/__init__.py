"""The controller: election, the event processor, state machines and the channel to brokers."""
