"""``varcheck audit``: measuring trained models' attention logits head by head."""
