"""Context shaping: conformal threshold, GMM outliers, segment extraction, sparse subset, reranking, ordering."""
