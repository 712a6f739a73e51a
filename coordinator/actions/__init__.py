"""KAI's scheduling actions, run in the configured order within one session."""
