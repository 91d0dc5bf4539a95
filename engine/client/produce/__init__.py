"""Producers: plain and transactional sends, batches and the ordered-send queue selectors."""
