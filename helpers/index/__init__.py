"""The sync's moving parts below rag_sync: planning, atomic and grouped document writes,
discards, write pacing, job control (start, wait, cancel) and watch mode."""
