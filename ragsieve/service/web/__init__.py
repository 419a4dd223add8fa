"""The website assistant's front: chat page, embeddable widget, source view and feedback (beside the service)."""

from ragsieve.service.web.setup import WebState, install

__all__ = ["WebState", "install"]
