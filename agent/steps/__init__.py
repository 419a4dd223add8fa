"""Plan steps, one per file; a plan lists the step classes it runs (`ragsieve.agent.plan.plans`)."""
