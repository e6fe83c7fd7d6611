"""Analyses of a Trace: per-head statistics and roles, activation statistics, gradients, positions, task patterns,
and what a head adds (norm-based attention) and how tokens mix across layers (rollout and flow)."""
