"""The CPU-scale tokenizer and model that the project builds itself, and checkpoint loading."""
