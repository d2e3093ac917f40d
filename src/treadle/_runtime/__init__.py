"""The superstep engine: routing, state, the loop, execution modes."""
