"""Who may read which document: principals, access rules, the index's access labels and their explanation."""
