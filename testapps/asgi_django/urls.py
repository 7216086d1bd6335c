from django.urls import path

from asgi_django import views

urlpatterns = [
    path("hello/<str:name>/", views.hello, name="hello"),
    path("async-hello/<str:name>/", views.async_hello, name="async-hello"),
    path("form/", views.message_form, name="form"),
    path("form/thanks/", views.thanks, name="thanks"),
]
