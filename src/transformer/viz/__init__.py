"""Plots: training curves (and, later, attention heatmaps)."""
