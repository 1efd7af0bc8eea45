"""What a fused ranking becomes for the agent: its confidence band and the answer's size budget."""
