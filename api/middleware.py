"""Django middleware of the API."""

from __future__ import annotations

from domain.errors import FieldError


class ReleaseViewCycles:
    """Once a DRF view's answer is rendered, nothing of the request holds it. DRF's rendering
    puts the response in its own `renderer_context`, and the view keeps it (`view.response`)
    while the response keeps the view: reference cycles that only the garbage collector frees,
    with everything the answer holds. A read of 1 000 events left about 3 000 objects (its
    frames and deliveries) to the collector, which then spent ~0.5 ms per read finding them
    (bench/RESULTS.md, 2026-11-27 07:18); without the cycles they are freed as soon as the web
    server has sent the answer. DRF's request, which holds itself in its `parser_context`, lets
    go of it too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        context = getattr(response, "renderer_context", None)
        if context:  # a DRF response, rendered by now
            context.pop("response", None)  # put there by the rendering
            view = context.get("view")
            drf_request = context.get("request")
            if view is not None:
                view.__dict__.pop("response", None)
            if drf_request is not None and getattr(drf_request, "parser_context", None):
                drf_request.parser_context = None
        return response


class FreedAnswers:
    """A DRF view mixin for views that answer with a rendered `HttpResponse` (a publish, a read,
    an ack: the views `api.lane` shares): no renderer reads the request's `parser_context` then,
    and it is let go as `ReleaseViewCycles` lets go of a rendered `Response`'s (it holds the view,
    which holds the request)."""

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if not hasattr(response, "renderer_context") and getattr(request, "parser_context", None):
            request.parser_context = None
        return response


class NamedFormats:
    """A DRF view mixin: `?format=` names one of the view's renderers (the schema's enum); an
    empty or unknown one is refused naming it (DRF would take an empty one as none, and answer an
    unknown one 404)."""

    def perform_content_negotiation(self, request, force=False):
        value = request.query_params.get("format")
        renderers = self.renderer_classes
        if not force and value is not None and value not in {r.format for r in renderers}:
            formats = ", ".join(sorted(r.format for r in renderers))
            raise FieldError("format", f"must be one of {formats} (or left out: the Accept header decides)")
        return super().perform_content_negotiation(request, force)
