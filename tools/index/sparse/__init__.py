"""The sparse-information subset (COS-Mix): each chunk's nearest neighbour, exact or by IVF cells."""
