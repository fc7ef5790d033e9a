"""Reliability harness: randomized source-vs-target checks, crash trials, server faults, bad input."""
