"""objcli: raw text to training-ready shards for any pretraining objective."""

__version__ = "0.1.0"
