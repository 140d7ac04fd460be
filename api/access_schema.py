"""The Api-Key scheme in the OpenAPI schema (drf-spectacular), beside Token and session."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "access.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Api-Key <prefix>.<secret>`: a key scoped to one reader group or to "
            "publishing on named streams (docs/security.md)",
        }
