"""Recordings of measured spaces, and the evaluator that answers from them."""
