"""Status helpers: conditions with stable transition times, field-naming error messages."""
