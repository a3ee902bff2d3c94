"""Run untrusted notebook code in a child process under limits; talk to it over a private channel."""
