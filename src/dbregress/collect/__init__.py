"""Metric collection from /proc: CPU, context switches and IO of process trees; host facts."""
