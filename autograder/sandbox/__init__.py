"""Run untrusted notebook code in a child process under limits, over a private channel."""
