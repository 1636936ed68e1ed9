"""HTTP clients' shared rules: what a server's reply may hold (:mod:`.safety`) and one retry policy
(:mod:`.retry`), used by the env clients (Search, WebShop, AppWorld) and the prompt-based agent."""
