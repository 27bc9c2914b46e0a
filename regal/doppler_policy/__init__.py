"""The Doppler dual policy (SEL / PLC): episodes, networks, training, the placement method
(`method`) and the guide that seeds the search with its assignments (`guide`). (The Doppler
simulator is `regal.scoring.doppler.reference`.)"""
