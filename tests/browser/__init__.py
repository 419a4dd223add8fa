"""The chat page, widget and insights page in Debian's chromium (Playwright)."""
