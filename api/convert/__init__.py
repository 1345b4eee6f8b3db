"""Wire to domain and back, shared by routes (no route module imports another): element queries, wait
conditions, batches, screenshots, windows, start options. Imports api/http and server."""
