"""The Transformer model library: masks, attention, positions, layers, the three model families."""
