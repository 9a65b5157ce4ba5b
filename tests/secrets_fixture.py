"""Fake credentials of many kinds: each (kind, text, needle), the needle being what must never be stored."""

# Assembled from pieces so the repository itself holds no scannable credential.
SECRETS = [
    ("aws_access_key", "AKIA" + "Q3ZX7KD4LMNPW2RT", "Q3ZX7KD4LMNPW2RT"),
    ("private_key", "-----BEGIN RSA " + "PRIVATE KEY----- MIIEowIBAAKCAQEA7zq", "MIIEowIBAAKCAQEA7zq"),
    ("github_pat_classic", "ghp_" + "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U", "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U"),
    ("github_pat_fine", "github_pat_" + "11ABCDE2F0q9W8e7R6t5Y4u3I2o1P0", "11ABCDE2F0q9W8e7R6t5Y4u3I2o1P0"),
    ("gitlab", "glpat-" + "x9Yz8Wv7Ut6Sr5Qp4On3", "x9Yz8Wv7Ut6Sr5Qp4On3"),
    ("slack", "xoxb-" + "2849371652-9384756102-QwErTyUiOp", "9384756102-QwErTyUiOp"),
    ("openai", "sk-" + "proj-T7fK2pQ9mW4xZ8vB3nC6jH1L", "T7fK2pQ9mW4xZ8vB3nC6jH1L"),
    ("anthropic", "sk-ant-" + "api03-Zq8Xw7Vu6Ts5Rq4Po3Nm2", "api03-Zq8Xw7Vu6Ts5Rq4Po3Nm2"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTYifQ.c2lnbmF0dXJlX3Rlc3Q", "c2lnbmF0dXJlX3Rlc3Q"),
    ("bearer", "Authorization: Bearer " + "a8F3kL9qW2eR7tY5uI1oP4sD6", "a8F3kL9qW2eR7tY5uI1oP4sD6"),
    ("password_assignment", "password=" + "Tr0ub4dor-and-3", "Tr0ub4dor-and-3"),
    ("credential_url", "https://deploy:" + "Hx7pQ2mN9@git.internal/repo.git", "Hx7pQ2mN9"),
    ("postgres_dsn", "postgresql://app:" + "Wq4eR8tY2@db.internal:5432/app", "Wq4eR8tY2"),
    ("ado_connection_string", "Server=db;User Id=sa;Password=" + "Zx9Cv8Bn7;", "Zx9Cv8Bn7"),
    ("stripe", "sk_live_" + "51HqW8eR7tY6uI5oP4aS3dF2", "51HqW8eR7tY6uI5oP4aS3dF2"),
    ("google_api", "AIza" + "SyD4f8G2h6J0k3L7z1X5c9V2b6N0m4Q8w2E", "SyD4f8G2h6J0k3L7z1X5c9V2b6N0m4Q8w2E"),
    ("quoted_api_key", 'api_key = "' + '9f86d081884c7d659a2feaa0c55ad015"', "9f86d081884c7d659a2feaa0c55ad015"),
]
