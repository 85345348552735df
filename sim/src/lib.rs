//! Deterministic simulation of a Baton cluster. Not built yet: see ARCHITECTURE.md ("What is deliberately absent").
