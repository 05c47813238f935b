"""The Pai Gow table controller: the decisions (pure) and the daemon that carries them out."""
