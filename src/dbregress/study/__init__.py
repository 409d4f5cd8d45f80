"""Studies: labs that reproduce a published report (a seed), with the seed's figures as
claims, and the page that sets our tables beside them (docs/studies.md)."""
