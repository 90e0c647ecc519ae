class Trainer:  # placeholder replaced below
    pass
