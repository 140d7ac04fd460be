"""The rules of streams as plain Python: names, stream cuts, publish batches. No Django."""
