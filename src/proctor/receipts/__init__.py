"""proctor.receipts layer."""
