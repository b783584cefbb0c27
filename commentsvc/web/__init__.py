"""The HTTP face: the blueprint, its views, content negotiation, the browsable page,
the OpenAPI document, responses and errors."""
