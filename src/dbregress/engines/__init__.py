"""Engine lifecycle: initialize, configure, start on a private unix socket, stop."""
