"""The broker: start-up, registration, request handling, the metadata cache."""
