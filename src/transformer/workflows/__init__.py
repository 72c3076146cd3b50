"""What combines training, decoding and scoring: the demo (demo.py) and sweeps of training
variants (sweep.py). Nothing imports this package but the command line."""
