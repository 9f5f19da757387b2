"""`acp-green new`: a ready project for an agent on acp_green (project.py), from the templates in templates/."""
