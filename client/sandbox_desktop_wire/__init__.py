"""The wire contract: pydantic models of requests and responses, the enums of every closed set of names
(`enums`), the numeric limits (`limits`) and the problem codes with their statuses and titles (`problems`),
shared by the server and the client."""
