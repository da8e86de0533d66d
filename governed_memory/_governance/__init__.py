"""_governance"""
