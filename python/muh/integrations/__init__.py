"""muh inside other engines: ``muh.integrations.transformers`` (Hugging Face transformers)."""
