"""The website crawler: `crawler.Crawler` (the loop), `fetcher` (HTTP, rate, redirects), `urls` (normalising,
links, canonicals, sitemaps), `frontier`, `state` (the resumable state folder) and `report` (what it returns)."""
