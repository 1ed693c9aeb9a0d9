"""Initial snapshot: chunk planning on the key and lock-free chunk reads."""
