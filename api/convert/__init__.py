"""Wire to domain and back, shared by routes (no route module imports another) and the approval gate: element
queries, wait conditions, batches, vendor calls, screenshots, windows, start options. Imports api/http and server."""
