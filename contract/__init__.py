"""The platform's contract: typed settings and the one stack loader, metric names and PromQL,
the scaling triggers, names and labels, GPU facts. No Pulumi imports: the program
(`components/`), the policy pack (`policies/`) and the capacity tooling (`capacity/`) all
import it, so they cannot drift apart."""
