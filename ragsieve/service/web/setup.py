"""What the assistant's routes share (link secret, widget keys, feedback store) and how they join the app."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragsieve.service.auth.widget_keys import WidgetKeys, normal_origin
from ragsieve.service.feedback.store import FeedbackStore


@dataclass
class WebState:
    secret: bytes
    widget_keys: WidgetKeys = field(default_factory=WidgetKeys)
    feedback: FeedbackStore | None = None
    page_origins: set[str] = field(default_factory=set)


def install(app, settings, widget_keys: WidgetKeys | None = None) -> None:
    """Add the pages, the assistant API and its CORS to `app` (after every other middleware: outermost)."""
    from ragsieve.service.web import access, api, insights, pages
    from ragsieve.service.web.links import load_secret

    widget_keys = widget_keys or WidgetKeys()
    widget_keys.check_names(set(app.state.registry.orchestrators))
    widget_keys.check_plans(set(app.state.registry.plans))
    data_dir = settings.data_dir
    app.state.web = WebState(
        secret=load_secret(data_dir),
        widget_keys=widget_keys,
        feedback=FeedbackStore.in_folder(data_dir) if data_dir else None,
        page_origins={o for o in map(normal_origin, settings.cors_origins) if o},
    )
    app.include_router(api.router)
    app.include_router(pages.router)
    app.include_router(insights.router)
    app.add_middleware(access.WidgetCors, widget_keys=widget_keys, page_origins=app.state.web.page_origins)
